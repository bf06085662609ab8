# worker console (internal/console): the operator's web console. Two
# policies, attached to nothing: console-read for the console as started
# without --write, console-write for one started with --write (it holds the
# read policy's statements too, so one policy is enough). Created with
# create_console_policies.
#
# What it calls, page by page:
#   overview       sqs:GetQueueAttributes on the queues and their DLQs,
#                  sqs:GetQueueUrl (a DLQ's URL from the redrive policy),
#                  dynamodb:DescribeTable and DescribeTimeToLive on the
#                  dedup table, dynamodb:Query on the outbox's index
#   find, stuck,   dynamodb:GetItem, dynamodb:Scan (stuck, conflicts: one
#   conflicts      bounded page per load); find also lists the DLQ as the
#                  dead-letter page does
#   dead letters   sqs:ReceiveMessage and sqs:ChangeMessageVisibility on
#                  the DLQs (the listing of worker redrive --dry-run)
#   outbox         dynamodb:Query and GetItem on the outbox and its indexes
# and with --write:
#   forget         dynamodb:DeleteItem on the dedup table
#   redrive        sqs:SendMessage on the queues, sqs:DeleteMessage on the DLQs
#   release, drop  dynamodb:UpdateItem on the outbox (a transaction of updates)
locals {
  console_queues = concat(var.queue_arns, var.dlq_arns)

  console_read_statements = [for s in [
    {
      sid       = "ConsoleRecords"
      actions   = ["dynamodb:DescribeTable", "dynamodb:DescribeTimeToLive", "dynamodb:GetItem", "dynamodb:Scan"]
      resources = [var.dedup_table_arn]
    },
    {
      sid       = "ConsoleQueues"
      actions   = ["sqs:GetQueueAttributes", "sqs:GetQueueUrl"]
      resources = local.console_queues
    },
    {
      sid       = "ConsoleDeadLetters"
      actions   = ["sqs:ChangeMessageVisibility", "sqs:ReceiveMessage"]
      resources = var.dlq_arns
    },
    {
      sid       = "ConsoleOutbox"
      actions   = ["dynamodb:GetItem", "dynamodb:Query"]
      resources = var.outbox_table_arn == null ? [] : [var.outbox_table_arn, "${var.outbox_table_arn}/index/*"]
    },
  ] : s if length(s.resources) > 0]

  console_write_statements = [for s in [
    {
      sid       = "ConsoleForget"
      actions   = ["dynamodb:DeleteItem"]
      resources = [var.dedup_table_arn]
    },
    {
      sid       = "ConsoleRedriveSend"
      actions   = ["sqs:SendMessage"]
      resources = var.queue_arns
    },
    {
      sid       = "ConsoleRedriveDelete"
      actions   = ["sqs:DeleteMessage"]
      resources = var.dlq_arns
    },
    {
      sid       = "ConsoleOutboxRelease"
      actions   = ["dynamodb:UpdateItem"]
      resources = var.outbox_table_arn == null ? [] : [var.outbox_table_arn]
    },
  ] : s if length(s.resources) > 0]
}

data "aws_iam_policy_document" "console_read" {
  count = var.create_console_policies ? 1 : 0

  dynamic "statement" {
    for_each = local.console_read_statements

    content {
      sid       = statement.value.sid
      actions   = statement.value.actions
      resources = statement.value.resources
    }
  }
}

data "aws_iam_policy_document" "console_write" {
  count = var.create_console_policies ? 1 : 0

  dynamic "statement" {
    for_each = concat(local.console_read_statements, local.console_write_statements)

    content {
      sid       = statement.value.sid
      actions   = statement.value.actions
      resources = statement.value.resources
    }
  }
}

resource "aws_iam_policy" "console_read" {
  count = var.create_console_policies ? 1 : 0

  name        = "${var.name}-console-read"
  path        = var.path
  description = "exactly: worker console without --write on ${var.dedup_table_arn}: reads the queues, DLQs (receives, as worker redrive --dry-run), records and outbox; changes nothing."
  policy      = data.aws_iam_policy_document.console_read[0].json
  tags        = var.tags
}

resource "aws_iam_policy" "console_write" {
  count = var.create_console_policies ? 1 : 0

  name        = "${var.name}-console-write"
  path        = var.path
  description = "exactly: worker console --write on ${var.dedup_table_arn}: the read policy, plus forget (DeleteItem), redrive (SendMessage, DeleteMessage) and outbox release/drop (UpdateItem). For people, never for a worker role."
  policy      = data.aws_iam_policy_document.console_write[0].json
  tags        = var.tags
}
