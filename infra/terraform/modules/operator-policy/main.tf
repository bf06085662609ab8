# Policies for the operator commands, for people: attach them to an operator's
# role, group or permission set. This module attaches them to nothing, and the
# worker modules never take them: a worker role that could delete a record
# could reopen a double effect.

# worker inspect (GetItem; GetQueueAttributes with --queue, to scope the key as
# the worker does; GetQueueUrl, GetQueueAttributes, and on the DLQs
# ReceiveMessage and ChangeMessageVisibility, to tell whether the message is in
# its queue's DLQ, as worker redrive --dry-run lists it) and worker stuck
# (Scan). Reads only: a listed dead letter is made visible again at once.
data "aws_iam_policy_document" "read" {
  statement {
    sid = "ReadRecords"
    actions = [
      "dynamodb:GetItem",
      "dynamodb:Scan",
    ]
    resources = [var.dedup_table_arn]
  }

  dynamic "statement" {
    for_each = length(concat(var.queue_arns, var.dlq_arns)) > 0 ? [concat(var.queue_arns, var.dlq_arns)] : []

    content {
      sid       = "ScopeKeys"
      actions   = ["sqs:GetQueueAttributes", "sqs:GetQueueUrl"]
      resources = statement.value
    }
  }

  dynamic "statement" {
    for_each = length(var.dlq_arns) > 0 ? [var.dlq_arns] : []

    content {
      sid       = "FindInDLQ"
      actions   = ["sqs:ChangeMessageVisibility", "sqs:ReceiveMessage"]
      resources = statement.value
    }
  }
}

resource "aws_iam_policy" "read" {
  name        = "${var.name}-read"
  path        = var.path
  description = "exactly: worker inspect and worker stuck on ${var.dedup_table_arn} (read only)."
  policy      = data.aws_iam_policy_document.read.json
  tags        = var.tags
}

# worker forget: it reads the record (GetItem), shows it, then deletes it on
# the condition that it is still the record shown (DeleteItem). The only
# deletion the project makes; the next delivery of the message runs its
# effect again.
data "aws_iam_policy_document" "forget" {
  count = var.create_forget_policy ? 1 : 0

  statement {
    sid = "ForgetRecord"
    actions = [
      "dynamodb:DeleteItem",
      "dynamodb:GetItem",
    ]
    resources = [var.dedup_table_arn]
  }
}

resource "aws_iam_policy" "forget" {
  count = var.create_forget_policy ? 1 : 0

  name        = "${var.name}-forget"
  path        = var.path
  description = "exactly: worker forget on ${var.dedup_table_arn}: deletes dedup records, so the effect of their message can run again. For people, never for a worker role."
  policy      = data.aws_iam_policy_document.forget[0].json
  tags        = var.tags
}

# worker outbox (list: Query on the table and its pending index), and
# worker outbox release / drop (GetItem of the group's head, then one
# TransactWriteItems of Updates: dynamodb:UpdateItem). Only with
# outbox_table_arn; attached to nothing.
data "aws_iam_policy_document" "outbox" {
  count = var.outbox_table_arn != null ? 1 : 0

  statement {
    sid = "HeldGroups"
    actions = [
      "dynamodb:GetItem",
      "dynamodb:Query",
      "dynamodb:UpdateItem",
    ]
    resources = [var.outbox_table_arn, "${var.outbox_table_arn}/index/*"]
  }
}

resource "aws_iam_policy" "outbox" {
  count = var.outbox_table_arn != null ? 1 : 0

  name        = "${var.name}-outbox"
  path        = var.path
  description = "exactly: worker outbox, worker outbox release and worker outbox drop on ${var.outbox_table_arn}: list the outbox, publish a held group again or drop its held message (never published then)."
  policy      = data.aws_iam_policy_document.outbox[0].json
  tags        = var.tags
}
