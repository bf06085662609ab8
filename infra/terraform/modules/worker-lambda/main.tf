locals {
  queue_list = [for k in sort(keys(var.queues)) : var.queues[k]]
  queue_arns = [for q in local.queue_list : q.arn]
  dlq_arns   = distinct(compact([for q in local.queue_list : q.dlq_arn]))

  # Lambda sets AWS_REGION itself (it is reserved); the worker sees
  # AWS_LAMBDA_RUNTIME_API and serves SQS events instead of polling.
  worker_settings = {
    WORKER_QUEUES       = join(",", [for q in local.queue_list : q.url])
    WORKER_DEDUP_TABLE  = var.dedup_table_name
    WORKER_EFFECT       = var.effect
    WORKER_LEDGER_TABLE = var.ledger_table_name
    WORKER_HTTP_URL     = var.http_url
    WORKER_DEDUP_KEY    = var.dedup_key
    WORKER_DEDUP_TTL    = var.dedup_ttl
    WORKER_NAMESPACE    = var.namespace
    WORKER_CONCURRENCY  = var.concurrency == null ? null : tostring(var.concurrency)
    WORKER_LOG_FORMAT   = var.log_format
    WORKER_LOG_LEVEL    = var.log_level
    WORKER_MOVE_TO_DLQ  = tostring(var.move_to_dlq)
    WORKER_OUTBOX_TABLE = var.outbox_table_name
  }
  # Lambda has no secrets injection: the function gets each secret's ARN as
  # <NAME>_ARN and reads the value itself (worker.Env.AWS).
  secret_environment = { for k, arn in var.secrets : "${k}_ARN" => arn }
  environment = merge(var.environment, local.secret_environment, {
    for k, v in local.worker_settings : k => v if v != null
  })

  secret_arns      = values(var.secrets)
  secret_parameter = distinct([for arn in local.secret_arns : arn if split(":", arn)[2] == "ssm"])
  secret_secret    = distinct([for arn in local.secret_arns : arn if split(":", arn)[2] == "secretsmanager"])
  secret_services  = distinct([for arn in local.secret_arns : "${split(":", arn)[2]}.${split(":", arn)[3]}.amazonaws.com"])
  secrets_statements = [for s in [
    { Sid = "ReadParameters", Effect = "Allow", Action = ["ssm:GetParameter"], Resource = local.secret_parameter },
    { Sid = "ReadSecrets", Effect = "Allow", Action = ["secretsmanager:GetSecretValue"], Resource = local.secret_secret },
    {
      Sid       = "DecryptSecrets"
      Effect    = "Allow"
      Action    = ["kms:Decrypt"]
      Resource  = var.secrets_kms_key_arns
      Condition = { StringEquals = { "kms:ViaService" = local.secret_services } }
    },
  ] : s if length(s.Resource) > 0 && length(local.secret_arns) > 0]

  # The secrets, then what a custom effect calls.
  effect_statements = concat(local.secrets_statements, [for sid in sort(keys(var.policy_statements)) : {
    Sid      = sid
    Effect   = "Allow"
    Action   = sort(var.policy_statements[sid].actions)
    Resource = sort(var.policy_statements[sid].resources)
  }])
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

# The event source mapping polls, deletes and changes visibility with this role;
# the worker itself reads queue attributes, may move a message to the DLQ and
# writes the tables.
data "aws_iam_policy_document" "this" {
  statement {
    sid = "Consume"
    actions = [
      "sqs:ChangeMessageVisibility",
      "sqs:DeleteMessage",
      "sqs:GetQueueAttributes",
      "sqs:GetQueueUrl",
      "sqs:ReceiveMessage",
    ]
    resources = local.queue_arns
  }

  dynamic "statement" {
    for_each = var.move_to_dlq ? [local.dlq_arns] : []

    content {
      sid = "DeadLetter"
      actions = [
        "sqs:GetQueueUrl",
        "sqs:SendMessage",
      ]
      resources = statement.value
    }
  }

  statement {
    sid = "DedupTable"
    actions = [
      "dynamodb:DescribeTable",
      "dynamodb:DescribeTimeToLive",
      "dynamodb:PutItem",
      "dynamodb:UpdateItem",
    ]
    resources = [var.dedup_table_arn]
  }

  dynamic "statement" {
    for_each = var.ledger_table_arn == null ? [] : [var.ledger_table_arn]

    content {
      sid = "LedgerTable"
      actions = [
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
      ]
      resources = [statement.value]
    }
  }

  # An effect that sends messages through the outbox: it reads a group's
  # head (GetItem), writes the message (PutItem) and the head (UpdateItem,
  # ConditionCheckItem) in its transaction. Only with outbox_table_name.
  dynamic "statement" {
    for_each = var.outbox_table_name == null ? [] : [var.outbox_table_arn]

    content {
      sid = "OutboxTable"
      actions = [
        "dynamodb:ConditionCheckItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
      ]
      resources = [statement.value]
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

  # Active tracing: Lambda sends the invocation's segments with the
  # function's role. X-Ray has no resource-level permissions for these two.
  dynamic "statement" {
    for_each = var.tracing_mode == "Active" ? ["*"] : []

    content {
      sid = "Tracing"
      actions = [
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
      ]
      #tfsec:ignore:aws-iam-no-policy-wildcards
      resources = [statement.value]
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
  name   = "worker"
  role   = aws_iam_role.this.id
  policy = data.aws_iam_policy_document.this.json

  lifecycle {
    precondition {
      condition     = (var.outbox_table_name == null) == (var.outbox_table_arn == null)
      error_message = "outbox_table_name and outbox_table_arn go together: the name is WORKER_OUTBOX_TABLE, the ARN what the role may write."
    }
  }
}

# The effect's own calls and secrets, kept apart from the worker's.
resource "aws_iam_role_policy" "effect" {
  count = length(local.effect_statements) > 0 ? 1 : 0

  name   = "effect"
  role   = aws_iam_role.this.id
  policy = jsonencode({ Version = "2012-10-17", Statement = local.effect_statements })
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

  tracing_config {
    mode = var.tracing_mode
  }

  tags = var.tags

  # The log group must exist first, or Lambda creates one without retention.
  depends_on = [aws_cloudwatch_log_group.this, aws_iam_role_policy.this, aws_iam_role_policy.effect]

  lifecycle {
    precondition {
      condition     = var.effect != "ledger" || (var.ledger_table_name != null && var.ledger_table_arn != null)
      error_message = "effect = \"ledger\" needs ledger_table_name and ledger_table_arn."
    }

    precondition {
      condition     = var.effect != "http" || var.http_url != null
      error_message = "effect = \"http\" needs http_url."
    }

    precondition {
      condition     = !var.move_to_dlq || alltrue([for q in values(var.queues) : q.dlq_arn != null])
      error_message = "move_to_dlq needs a dlq_arn for every queue: the role may send to those only."
    }

    precondition {
      condition     = length(setintersection(keys(var.environment), [for k in keys(var.secrets) : "${k}_ARN"])) == 0
      error_message = "A variable of environment is also a secret's <NAME>_ARN."
    }
  }
}

resource "aws_lambda_event_source_mapping" "this" {
  for_each = var.queues

  event_source_arn = each.value.arn
  function_name    = aws_lambda_function.this.arn
  enabled          = true

  # FIFO: at most 10 per batch and no batching window (preconditions
  # below). The handler reports the failed message and every later one of
  # its group.
  batch_size                         = var.batch_size
  maximum_batching_window_in_seconds = var.maximum_batching_window_in_seconds
  function_response_types            = ["ReportBatchItemFailures"]

  # Lambda deletes a message that matches no pattern, uninvoked.
  dynamic "filter_criteria" {
    for_each = length(var.filter_patterns) > 0 ? [var.filter_patterns] : []

    content {
      dynamic "filter" {
        for_each = filter_criteria.value

        content {
          pattern = filter.value
        }
      }
    }
  }

  dynamic "metrics_config" {
    for_each = length(var.event_source_mapping_metrics) > 0 ? [var.event_source_mapping_metrics] : []

    content {
      metrics = metrics_config.value
    }
  }

  # Lambda takes either a maximum concurrency or provisioned pollers, never
  # both.
  dynamic "scaling_config" {
    for_each = var.provisioned_pollers == null ? [var.maximum_concurrency] : []

    content {
      maximum_concurrency = scaling_config.value
    }
  }

  dynamic "provisioned_poller_config" {
    for_each = var.provisioned_pollers == null ? [] : [var.provisioned_pollers]

    content {
      minimum_pollers = provisioned_poller_config.value.minimum_pollers
      maximum_pollers = provisioned_poller_config.value.maximum_pollers
    }
  }

  lifecycle {
    # A FIFO queue's name, and so its ARN, ends in .fifo.
    precondition {
      condition     = !endswith(each.value.arn, ".fifo") || var.batch_size <= 10
      error_message = "A FIFO queue takes batch_size of at most 10 (Lambda's limit for FIFO event sources)."
    }

    precondition {
      condition     = !endswith(each.value.arn, ".fifo") || var.maximum_batching_window_in_seconds == 0
      error_message = "A FIFO queue takes no batching window: set maximum_batching_window_in_seconds = 0 (Lambda refuses it for FIFO event sources)."
    }

    precondition {
      condition     = var.batch_size <= 10 || var.maximum_batching_window_in_seconds >= 1
      error_message = "batch_size above 10 needs maximum_batching_window_in_seconds of at least 1 (Lambda's rule for SQS event sources)."
    }

    # Each hand-back of a message a FIFO batch could not start spends one
    # of its receives: at batch_size or fewer, the redrive policy can move
    # the batch's last message without it ever running (docs/DEPLOY.md).
    precondition {
      condition     = !endswith(each.value.arn, ".fifo") || each.value.max_receive_count == null || each.value.max_receive_count > var.batch_size
      error_message = "A FIFO queue's max_receive_count must be above batch_size: a message waiting behind earlier ones of its group spends up to batch_size - 1 receives unstarted, and the redrive policy could dead-letter it without it ever running. Raise the queue's max_receive_count to batch_size plus the attempts wanted of each message (the queue module's default is 15), or lower batch_size."
    }

    precondition {
      condition     = each.value.visibility_timeout_seconds >= 6 * var.timeout
      error_message = "The queue's visibility timeout must be at least 6 x the function timeout (AWS's guidance for SQS event sources), or a message becomes visible again while a retried invocation still runs."
    }
  }
}
