locals {
  pending_index_arn = "${var.outbox_table_arn}/index/pending"

  # Lambda sets AWS_REGION itself (it is reserved). With no arguments on
  # Lambda the binary runs WORKER_COMMAND: relay, whose handler takes both the
  # stream's batches and the sweep's scheduled events.
  relay_settings = {
    WORKER_COMMAND         = "relay"
    WORKER_OUTBOX_TABLE    = var.outbox_table_name
    WORKER_RELAY_RETENTION = var.retention
    WORKER_LOG_FORMAT      = var.log_format
    WORKER_LOG_LEVEL       = var.log_level
  }
  environment = merge(var.environment, local.relay_settings)
}

resource "aws_cloudwatch_log_group" "this" {
  name              = "/aws/lambda/${var.function_name}"
  retention_in_days = var.log_retention_in_days
  kms_key_id        = var.log_kms_key_id
  tags              = var.tags
}

# The account the role (and so the function) is created in.
data "aws_caller_identity" "current" {}

# Only Lambda, only for functions of this account (the confused-deputy
# condition AWS recommends).
data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [data.aws_caller_identity.current.account_id]
    }
  }
}

resource "aws_iam_role" "this" {
  name                 = "${var.function_name}-lambda"
  path                 = var.role_path
  permissions_boundary = var.permissions_boundary
  assume_role_policy   = data.aws_iam_policy_document.assume.json
  tags                 = var.tags
}

# The relay's calls, and the event source mapping's reads of the stream
# (the mapping polls with the function's role).
data "aws_iam_policy_document" "this" {
  # A group's head and messages (Query, GetItem); publishing marks them sent
  # (UpdateItem, also as items of a TransactWriteItems, which has no action of
  # its own, with ConditionCheckItem). Never DeleteItem or Scan: TTL deletes.
  statement {
    sid = "OutboxTable"
    actions = [
      "dynamodb:ConditionCheckItem",
      "dynamodb:GetItem",
      "dynamodb:Query",
      "dynamodb:UpdateItem",
    ]
    resources = [var.outbox_table_arn]
  }

  # The sweep: the groups with messages to publish.
  statement {
    sid       = "OutboxPendingIndex"
    actions   = ["dynamodb:Query"]
    resources = [local.pending_index_arn]
  }

  statement {
    sid = "OutboxStream"
    actions = [
      "dynamodb:DescribeStream",
      "dynamodb:GetRecords",
      "dynamodb:GetShardIterator",
      "dynamodb:ListStreams",
    ]
    resources = [var.outbox_stream_arn]
  }

  # SendMessageBatch is authorized by sqs:SendMessage.
  dynamic "statement" {
    for_each = length(var.queue_arns) > 0 ? [var.queue_arns] : []

    content {
      sid       = "Publish"
      actions   = ["sqs:SendMessage"]
      resources = statement.value
    }
  }

  # PublishBatch is authorized by sns:Publish.
  dynamic "statement" {
    for_each = length(var.topic_arns) > 0 ? [var.topic_arns] : []

    content {
      sid       = "PublishTopic"
      actions   = ["sns:Publish"]
      resources = statement.value
    }
  }

  dynamic "statement" {
    for_each = length(var.kms_key_arns) > 0 ? [var.kms_key_arns] : []

    content {
      sid = "QueueKeys"
      actions = [
        "kms:Decrypt",
        "kms:GenerateDataKey",
      ]
      resources = statement.value
    }
  }

  statement {
    sid = "Logs"
    actions = [
      "logs:CreateLogStream",
      "logs:PutLogEvents",
    ]
    # Streams of this one log group: Lambda names them at run time, so the
    # stream part cannot be narrower than a wildcard.
    #tfsec:ignore:aws-iam-no-policy-wildcards
    resources = ["${aws_cloudwatch_log_group.this.arn}:*"]
  }
}

resource "aws_iam_role_policy" "this" {
  name   = "relay"
  role   = aws_iam_role.this.id
  policy = data.aws_iam_policy_document.this.json

  lifecycle {
    precondition {
      condition     = length(var.queue_arns) + length(var.topic_arns) > 0
      error_message = "Give the relay somewhere to publish: at least one queue in queue_arns or one topic in topic_arns."
    }
  }
}

resource "aws_lambda_function" "this" {
  function_name    = var.function_name
  role             = aws_iam_role.this.arn
  runtime          = "provided.al2023"
  handler          = "bootstrap"
  architectures    = [var.architecture]
  filename         = var.package_path
  source_code_hash = filebase64sha256(var.package_path)
  memory_size      = var.memory_size
  timeout          = var.timeout

  reserved_concurrent_executions = var.reserved_concurrent_executions

  environment {
    variables = local.environment
  }

  tags = var.tags

  # The log group must exist first, or Lambda creates one without retention.
  depends_on = [aws_cloudwatch_log_group.this, aws_iam_role_policy.this]

  lifecycle {
    precondition {
      condition     = length(setintersection(keys(var.environment), keys(local.relay_settings))) == 0
      error_message = "environment cannot set a setting this module manages (WORKER_COMMAND, WORKER_OUTBOX_TABLE, WORKER_RELAY_RETENTION, WORKER_LOG_*)."
    }
  }
}

# --- The stream: publish as soon as a transaction commits -----------------------
# The records carry keys only; the relay drains the groups they name. What
# it publishes is read from the table, so a record lost or skipped costs
# latency, never a message: the sweep below finds every group still pending.
# That is why a failing batch is retried a few times and then dropped rather
# than sent to a failure destination: a batch that keeps failing blocks its
# shard (records of a shard are handed over in order), and so every group
# whose writes land in it, until it is dropped.
resource "aws_lambda_event_source_mapping" "stream" {
  event_source_arn  = var.outbox_stream_arn
  function_name     = aws_lambda_function.this.arn
  enabled           = true
  starting_position = "LATEST"

  batch_size                         = var.stream_batch_size
  maximum_batching_window_in_seconds = var.stream_maximum_batching_window_in_seconds
  parallelization_factor             = var.stream_parallelization_factor

  # A batch that fails is split in two and each half retried (a split does
  # not count towards the retry quota): a group whose publishing fails (a
  # queue the role may not send to, say) no longer holds back the others of
  # its batch, and only the half holding it is dropped in the end.
  bisect_batch_on_function_error = true
  maximum_retry_attempts         = var.stream_maximum_retry_attempts
  maximum_record_age_in_seconds  = var.stream_maximum_record_age_in_seconds

  # Only new items: a message is always a new item (its sort key is the next
  # sequence number of its group). The relay's own marks (MODIFY) and TTL's
  # deletions (REMOVE) would only wake it for nothing.
  dynamic "filter_criteria" {
    for_each = var.stream_inserts_only ? [1] : []

    content {
      filter {
        pattern = jsonencode({ eventName = ["INSERT"] })
      }
    }
  }

  # The mapping checks at creation that the role may read the stream.
  depends_on = [aws_iam_role_policy.this]
}

# --- The sweep: the safety net ------------------------------------------------
# A scheduled event makes the relay query the whole pending index and publish
# every group found there: what a lost stream record, a dropped batch or a
# failed invocation left behind goes out within a period.
resource "aws_cloudwatch_event_rule" "sweep" {
  name                = "${var.function_name}-sweep"
  description         = "Sweep of the outbox ${var.outbox_table_name}: publishes the groups the stream did not."
  schedule_expression = var.sweep_schedule_expression
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "sweep" {
  rule      = aws_cloudwatch_event_rule.sweep.name
  target_id = "relay"
  arn       = aws_lambda_function.this.arn
}

# EventBridge may invoke the function, for this rule only.
resource "aws_lambda_permission" "sweep" {
  statement_id  = "AllowOutboxSweep"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.this.function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.sweep.arn
}
