locals {
  queue_list = [for k in sort(keys(var.queues)) : var.queues[k]]
  queue_arns = [for q in local.queue_list : q.arn]
  dlq_arns   = distinct(compact([for q in local.queue_list : q.dlq_arn]))

  # arn:<partition>:sqs:<region>:<account>:<name>
  partition   = split(":", local.queue_arns[0])[1]
  region      = split(":", local.queue_arns[0])[3]
  queue_names = [for arn in local.queue_arns : split(":", arn)[5]]

  cluster_name = split("/", var.cluster_arn)[1]
  # arn:<partition>:ecs:<region>:<account>:cluster/<name>: where the tasks run.
  cluster_partition = split(":", var.cluster_arn)[1]
  cluster_region    = split(":", var.cluster_arn)[3]
  account_id        = split(":", var.cluster_arn)[4]

  # The worker's settings; null ones are left to the worker's defaults.
  worker_settings = {
    AWS_REGION              = local.region
    WORKER_QUEUES           = join(",", [for q in local.queue_list : q.url])
    WORKER_DEDUP_TABLE      = var.dedup_table_name
    WORKER_EFFECT           = var.effect
    WORKER_LEDGER_TABLE     = var.ledger_table_name
    WORKER_HTTP_URL         = var.http_url
    WORKER_DEDUP_KEY        = var.dedup_key
    WORKER_DEDUP_TTL        = var.dedup_ttl
    WORKER_NAMESPACE        = var.namespace
    WORKER_CONCURRENCY      = var.concurrency == null ? null : tostring(var.concurrency)
    WORKER_SHUTDOWN_TIMEOUT = "${var.shutdown_timeout_seconds}s"
    WORKER_METRICS_ADDR     = ":${var.metrics_port}"
    WORKER_LOG_FORMAT       = var.log_format
    WORKER_METRICS_FORMAT   = var.metrics_format
    WORKER_LOG_LEVEL        = var.log_level
    WORKER_MOVE_TO_DLQ      = tostring(var.move_to_dlq)
    WORKER_OUTBOX_TABLE     = var.outbox_table_name
  }
  environment = merge(var.environment, { for k, v in local.worker_settings : k => v if v != null })

  # Secrets: ECS reads them with the execution role when a task starts. A
  # Secrets Manager reference may end in :json-key:version-stage:version-id;
  # IAM wants the secret's own ARN, its first seven fields.
  secret_arns      = values(var.secrets)
  secret_parameter = distinct([for arn in local.secret_arns : arn if split(":", arn)[2] == "ssm"])
  secret_secret    = distinct([for arn in local.secret_arns : join(":", slice(split(":", arn), 0, 7)) if split(":", arn)[2] == "secretsmanager"])
  secret_services  = distinct([for arn in local.secret_arns : "${split(":", arn)[2]}.${split(":", arn)[3]}.amazonaws.com"])
  secrets_statements = [for s in [
    { Sid = "ReadParameters", Effect = "Allow", Action = ["ssm:GetParameters"], Resource = local.secret_parameter },
    { Sid = "ReadSecrets", Effect = "Allow", Action = ["secretsmanager:GetSecretValue"], Resource = local.secret_secret },
    {
      Sid       = "DecryptSecrets"
      Effect    = "Allow"
      Action    = ["kms:Decrypt"]
      Resource  = var.secrets_kms_key_arns
      Condition = { StringEquals = { "kms:ViaService" = local.secret_services } }
    },
  ] : s if length(s.Resource) > 0 && length(local.secret_arns) > 0]

  # What a custom effect calls, on the task role.
  effect_statements = [for sid in sort(keys(var.policy_statements)) : {
    Sid      = sid
    Effect   = "Allow"
    Action   = sort(var.policy_statements[sid].actions)
    Resource = sort(var.policy_statements[sid].resources)
  }]
}

resource "aws_cloudwatch_log_group" "this" {
  name              = "/ecs/${var.name}"
  retention_in_days = var.log_retention_in_days
  kms_key_id        = var.log_kms_key_id
  tags              = var.tags
}

# Both roles: only ECS, only for tasks of this account and region (the
# confused-deputy conditions AWS recommends for ecs-tasks.amazonaws.com).
data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }

    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = ["arn:${local.cluster_partition}:ecs:${local.cluster_region}:${local.account_id}:*"]
    }
  }
}

# Execution role: pulls the image and writes the awslogs stream (ECS agent, not the worker).
resource "aws_iam_role" "execution" {
  name                 = "${var.name}-execution"
  path                 = var.role_path
  permissions_boundary = var.permissions_boundary
  assume_role_policy   = data.aws_iam_policy_document.assume.json
  tags                 = var.tags
}

resource "aws_iam_role_policy_attachment" "execution" {
  role       = aws_iam_role.execution.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
}

# Only the secrets given, only through SSM or Secrets Manager.
resource "aws_iam_role_policy" "execution_secrets" {
  count = length(var.secrets) > 0 ? 1 : 0

  name   = "secrets"
  role   = aws_iam_role.execution.id
  policy = jsonencode({ Version = "2012-10-17", Statement = local.secrets_statements })
}

# Task role: only the calls the worker makes, only on the given queues and tables.
resource "aws_iam_role" "task" {
  name                 = "${var.name}-task"
  path                 = var.role_path
  permissions_boundary = var.permissions_boundary
  assume_role_policy   = data.aws_iam_policy_document.assume.json
  tags                 = var.tags
}

data "aws_iam_policy_document" "task" {
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
}

resource "aws_iam_role_policy" "task" {
  name   = "worker"
  role   = aws_iam_role.task.id
  policy = data.aws_iam_policy_document.task.json

  lifecycle {
    precondition {
      condition     = (var.outbox_table_name == null) == (var.outbox_table_arn == null)
      error_message = "outbox_table_name and outbox_table_arn go together: the name is WORKER_OUTBOX_TABLE, the ARN what the role may write."
    }
  }
}

# A custom effect's own calls, kept apart from the worker's.
resource "aws_iam_role_policy" "effect" {
  count = length(var.policy_statements) > 0 ? 1 : 0

  name   = "effect"
  role   = aws_iam_role.task.id
  policy = jsonencode({ Version = "2012-10-17", Statement = local.effect_statements })
}

resource "aws_ecs_task_definition" "this" {
  family                   = var.name
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.cpu
  memory                   = var.memory
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = aws_iam_role.task.arn

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = var.cpu_architecture
  }

  container_definitions = jsonencode([
    {
      name        = "worker"
      image       = var.container_image
      command     = var.container_command
      essential   = true
      environment = [for k in sort(keys(local.environment)) : { name = k, value = local.environment[k] }]
      secrets     = length(var.secrets) == 0 ? null : [for k in sort(keys(var.secrets)) : { name = k, valueFrom = var.secrets[k] }]
      portMappings = [
        { name = "metrics", containerPort = var.metrics_port, protocol = "tcp" },
      ]
      # The image has no shell or curl: the worker asks its own /healthz
      # (WORKER_METRICS_ADDR from the environment above).
      healthCheck = {
        command     = ["CMD", "/worker", "healthcheck"]
        interval    = 15
        timeout     = 5
        retries     = 3
        startPeriod = 60
      }
      # SIGTERM, then this long for the worker's graceful shutdown, then SIGKILL.
      stopTimeout            = var.stop_timeout
      readonlyRootFilesystem = true
      logConfiguration = {
        logDriver = "awslogs"
        options = {
          awslogs-group         = aws_cloudwatch_log_group.this.name
          awslogs-region        = local.region
          awslogs-stream-prefix = "worker"
        }
      }
    },
  ])

  tags = var.tags

  lifecycle {
    precondition {
      condition     = var.shutdown_timeout_seconds < var.stop_timeout
      error_message = "shutdown_timeout_seconds must be below stop_timeout, or ECS kills the worker with SIGKILL before it has flushed its deletes."
    }

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
      condition     = length(setintersection(keys(var.environment), keys(var.secrets))) == 0
      error_message = "A variable is set in both environment and secrets."
    }
  }
}

resource "aws_ecs_service" "this" {
  name                   = var.name
  cluster                = var.cluster_arn
  task_definition        = aws_ecs_task_definition.this.arn
  desired_count          = var.desired_count
  launch_type            = "FARGATE"
  platform_version       = "LATEST"
  enable_execute_command = var.enable_execute_command
  propagate_tags         = "SERVICE"

  # Old and new tasks overlap during a deployment; the dedup table keeps that safe.
  deployment_minimum_healthy_percent = 100
  deployment_maximum_percent         = 200

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = var.subnet_ids
    security_groups  = var.security_group_ids
    assign_public_ip = var.assign_public_ip
  }

  tags = var.tags

  # Tasks read their secrets and call what the effect needs from the start.
  depends_on = [aws_iam_role_policy.execution_secrets, aws_iam_role_policy.effect]

  lifecycle {
    # Autoscaling changes the count; Terraform must not set it back.
    ignore_changes = [desired_count]
  }
}

resource "aws_appautoscaling_target" "this" {
  count = var.autoscaling_enabled ? 1 : 0

  service_namespace  = "ecs"
  resource_id        = "service/${local.cluster_name}/${aws_ecs_service.this.name}"
  scalable_dimension = "ecs:service:DesiredCount"
  min_capacity       = var.autoscaling_min_capacity
  max_capacity       = var.autoscaling_max_capacity
  tags               = var.tags

  lifecycle {
    precondition {
      condition     = var.autoscaling_max_capacity >= var.autoscaling_min_capacity
      error_message = "autoscaling_max_capacity must be at least autoscaling_min_capacity."
    }
  }
}

# Backlog per task: sum of visible messages over the queues / running tasks.
resource "aws_appautoscaling_policy" "backlog" {
  count = var.autoscaling_enabled ? 1 : 0

  name               = "${var.name}-backlog-per-task"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.this[0].service_namespace
  resource_id        = aws_appautoscaling_target.this[0].resource_id
  scalable_dimension = aws_appautoscaling_target.this[0].scalable_dimension

  target_tracking_scaling_policy_configuration {
    target_value       = var.autoscaling_target_backlog_per_task
    scale_in_cooldown  = var.autoscaling_scale_in_cooldown
    scale_out_cooldown = var.autoscaling_scale_out_cooldown

    customized_metric_specification {
      dynamic "metrics" {
        for_each = local.queue_names

        content {
          id          = "visible${metrics.key}"
          label       = "Visible messages in ${metrics.value}"
          return_data = false

          metric_stat {
            stat = "Sum"

            metric {
              namespace   = "AWS/SQS"
              metric_name = "ApproximateNumberOfMessagesVisible"

              dimensions {
                name  = "QueueName"
                value = metrics.value
              }
            }
          }
        }
      }

      metrics {
        id          = "tasks"
        label       = "Running tasks"
        return_data = false

        metric_stat {
          stat = "Average"

          metric {
            namespace   = "ECS/ContainerInsights"
            metric_name = "RunningTaskCount"

            dimensions {
              name  = "ClusterName"
              value = local.cluster_name
            }

            dimensions {
              name  = "ServiceName"
              value = aws_ecs_service.this.name
            }
          }
        }
      }

      metrics {
        id          = "backlogpertask"
        label       = "Visible messages per running task"
        expression  = "(${join(" + ", [for i in range(length(local.queue_names)) : "visible${i}"])}) / tasks"
        return_data = true
      }
    }
  }
}
