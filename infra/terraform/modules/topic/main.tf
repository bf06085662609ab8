locals {
  topic_name = "${var.name}${var.fifo_topic ? ".fifo" : ""}"

  # The queues whose policy this module writes; the others get theirs from
  # the queue module, through queue_policy_documents.
  own_policy = { for key, q in var.queues : key => q if q.write_queue_policy }
}

resource "aws_sns_topic" "this" {
  name       = local.topic_name
  fifo_topic = var.fifo_topic

  # Off: the relay sends every message's deduplication id (its
  # idempotency-key), and a hash of the body would make two logical messages
  # with the same body one.
  content_based_deduplication = var.fifo_topic ? false : null

  kms_master_key_id = var.kms_master_key_id

  tags = var.tags
}

resource "aws_sns_topic_subscription" "this" {
  for_each = var.queues

  topic_arn = aws_sns_topic.this.arn
  protocol  = "sqs"
  endpoint  = each.value.arn

  raw_message_delivery = each.value.raw_message_delivery
  filter_policy        = each.value.filter_policy
  filter_policy_scope  = each.value.filter_policy == null ? null : each.value.filter_policy_scope

  lifecycle {
    # A queue's name, and so its ARN, ends in .fifo when it is FIFO.
    precondition {
      condition     = var.fifo_topic || !endswith(each.value.arn, ".fifo")
      error_message = "A standard topic cannot deliver to a FIFO queue: set fifo_topic = true, or subscribe a standard queue."
    }
  }
}

# What lets the topic, and only it, send to each queue.
data "aws_iam_policy_document" "queue" {
  for_each = var.queues

  statement {
    sid       = "AllowTopic"
    effect    = "Allow"
    actions   = ["sqs:SendMessage"]
    resources = [each.value.arn]

    principals {
      type        = "Service"
      identifiers = ["sns.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [aws_sns_topic.this.arn]
    }
  }
}

# SQS keeps one policy per queue: written here only for a queue that has no
# other (write_queue_policy). A queue from the queue module takes the
# statement in its source_queue_policy_documents instead.
resource "aws_sqs_queue_policy" "this" {
  for_each = local.own_policy

  queue_url = each.value.url
  policy    = data.aws_iam_policy_document.queue[each.key].json
}
