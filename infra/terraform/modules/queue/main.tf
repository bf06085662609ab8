locals {
  suffix     = var.fifo_queue ? ".fifo" : ""
  queue_name = "${var.name}${local.suffix}"
  dlq_name   = "${coalesce(var.dlq_name, "${var.name}-dlq")}${local.suffix}"

  # FIFO-only attributes must be null on a standard queue.
  content_based_deduplication = var.fifo_queue ? var.content_based_deduplication : null
  deduplication_scope         = var.fifo_queue ? (var.high_throughput_fifo ? "messageGroup" : "queue") : null
  fifo_throughput_limit       = var.fifo_queue ? (var.high_throughput_fifo ? "perMessageGroupId" : "perQueue") : null

  # SSE-KMS with a customer key, else SSE-SQS: never unencrypted.
  sqs_managed_sse_enabled = var.kms_master_key_id == null ? true : null
  kms_reuse_period        = var.kms_master_key_id == null ? null : var.kms_data_key_reuse_period_seconds
}

resource "aws_sqs_queue" "dlq" {
  count = var.create_dlq ? 1 : 0

  name = local.dlq_name

  # A FIFO queue can only redrive to a FIFO DLQ.
  fifo_queue                  = var.fifo_queue
  content_based_deduplication = local.content_based_deduplication
  deduplication_scope         = local.deduplication_scope
  fifo_throughput_limit       = local.fifo_throughput_limit

  visibility_timeout_seconds = coalesce(var.dlq_visibility_timeout_seconds, var.visibility_timeout_seconds)
  message_retention_seconds  = var.dlq_message_retention_seconds
  receive_wait_time_seconds  = var.receive_wait_time_seconds
  max_message_size           = var.max_message_size

  sqs_managed_sse_enabled           = local.sqs_managed_sse_enabled
  kms_master_key_id                 = var.kms_master_key_id
  kms_data_key_reuse_period_seconds = local.kms_reuse_period

  tags = var.tags

  lifecycle {
    precondition {
      condition     = var.dlq_message_retention_seconds >= var.message_retention_seconds
      error_message = "dlq_message_retention_seconds must be at least message_retention_seconds: a moved message keeps its original enqueue time and would expire early in the DLQ."
    }
  }
}

resource "aws_sqs_queue" "this" {
  name = local.queue_name

  fifo_queue                  = var.fifo_queue
  content_based_deduplication = local.content_based_deduplication
  deduplication_scope         = local.deduplication_scope
  fifo_throughput_limit       = local.fifo_throughput_limit

  visibility_timeout_seconds = var.visibility_timeout_seconds
  message_retention_seconds  = var.message_retention_seconds
  receive_wait_time_seconds  = var.receive_wait_time_seconds
  delay_seconds              = var.delay_seconds
  max_message_size           = var.max_message_size

  sqs_managed_sse_enabled           = local.sqs_managed_sse_enabled
  kms_master_key_id                 = var.kms_master_key_id
  kms_data_key_reuse_period_seconds = local.kms_reuse_period

  tags = var.tags
}

# Separate resources break the cycle queue -> DLQ ARN -> queue ARN.
resource "aws_sqs_queue_redrive_policy" "this" {
  count = var.create_dlq ? 1 : 0

  queue_url = aws_sqs_queue.this.id
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dlq[0].arn
    maxReceiveCount     = var.max_receive_count
  })
}

resource "aws_sqs_queue_redrive_allow_policy" "dlq" {
  count = var.create_dlq ? 1 : 0

  queue_url = aws_sqs_queue.dlq[0].id
  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.this.arn]
  })
}

# Queue policies. SQS keeps one policy per queue, so this module writes the
# whole of it: the deny below, plus (on the queue) any statements given in
# source_queue_policy_documents (an SNS subscription's sqs:SendMessage, ...).
# Manage the queue's policy here, not with another aws_sqs_queue_policy.
locals {
  policy_queues = { for name, q in {
    queue = {
      enabled = var.deny_insecure_transport || length(var.source_queue_policy_documents) > 0
      arn     = aws_sqs_queue.this.arn
      url     = aws_sqs_queue.this.id
      sources = var.source_queue_policy_documents
    }
    dlq = {
      enabled = var.create_dlq && var.deny_insecure_transport
      arn     = one(aws_sqs_queue.dlq[*].arn)
      url     = one(aws_sqs_queue.dlq[*].id)
      sources = []
    }
  } : name => q if q.enabled }
}

data "aws_iam_policy_document" "queue" {
  for_each = local.policy_queues

  source_policy_documents = each.value.sources

  # Every call over plain HTTP is refused, whoever makes it. The SDKs, the
  # worker and the Lambda event source mapping all use HTTPS.
  dynamic "statement" {
    for_each = var.deny_insecure_transport ? [each.value.arn] : []

    content {
      sid       = "DenyInsecureTransport"
      effect    = "Deny"
      actions   = ["sqs:*"]
      resources = [statement.value]

      principals {
        type        = "*"
        identifiers = ["*"]
      }

      condition {
        test     = "Bool"
        variable = "aws:SecureTransport"
        values   = ["false"]
      }
    }
  }
}

resource "aws_sqs_queue_policy" "this" {
  for_each = local.policy_queues

  queue_url = each.value.url
  policy    = data.aws_iam_policy_document.queue[each.key].json
}
