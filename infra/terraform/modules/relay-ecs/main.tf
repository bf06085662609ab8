locals {
  # arn:<partition>:dynamodb:<region>:<account>:table/<name>
  partition         = split(":", var.outbox_table_arn)[1]
  region            = split(":", var.outbox_table_arn)[3]
  pending_index_arn = "${var.outbox_table_arn}/index/pending"

  # arn:<partition>:ecs:<region>:<account>:cluster/<name>: where the tasks run.
  cluster_partition = split(":", var.cluster_arn)[1]
  cluster_region    = split(":", var.cluster_arn)[3]
  account_id        = split(":", var.cluster_arn)[4]

  # The relay's settings (worker relay).
  relay_settings = {
    AWS_REGION             = local.region
    WORKER_OUTBOX_TABLE    = var.outbox_table_name
    WORKER_RELAY_POLL      = var.poll_interval
    WORKER_RELAY_RETENTION = var.retention
    WORKER_METRICS_ADDR    = ":${var.metrics_port}"
    WORKER_METRICS_FORMAT  = var.metrics_format
    WORKER_LOG_FORMAT      = var.log_format
    WORKER_LOG_LEVEL       = var.log_level
  }
  environment = merge(var.environment, local.relay_settings)
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

# Execution role: pulls the image and writes the awslogs stream (ECS agent, not the relay).
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

# Task role: only the calls the relay makes, only on the outbox table, its
# pending index and the destination queues.
resource "aws_iam_role" "task" {
  name                 = "${var.name}-task"
  path                 = var.role_path
  permissions_boundary = var.permissions_boundary
  assume_role_policy   = data.aws_iam_policy_document.assume.json
  tags                 = var.tags
}

data "aws_iam_policy_document" "task" {
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
}

resource "aws_iam_role_policy" "task" {
  name   = "relay"
  role   = aws_iam_role.task.id
  policy = data.aws_iam_policy_document.task.json

  lifecycle {
    precondition {
      condition     = length(var.queue_arns) + length(var.topic_arns) > 0
      error_message = "Give the relay somewhere to publish: at least one queue in queue_arns or one topic in topic_arns."
    }
  }
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
      name        = "relay"
      image       = var.container_image
      command     = var.container_command
      essential   = true
      environment = [for k in sort(keys(local.environment)) : { name = k, value = local.environment[k] }]
      portMappings = [
        { name = "metrics", containerPort = var.metrics_port, protocol = "tcp" },
      ]
      # The image has no shell or curl: the binary asks its own /healthz
      # (WORKER_METRICS_ADDR from the environment above), as the worker's does.
      healthCheck = {
        command     = ["CMD", "/worker", "healthcheck"]
        interval    = 15
        timeout     = 5
        retries     = 3
        startPeriod = 30
      }
      # SIGTERM, then this long, then SIGKILL. A relay stopped between a
      # send and its mark sends that message again later, with the same id
      # (its MessageDeduplicationId and idempotency-key): FIFO deduplication
      # or the consumer's dedup ledger drops the repeat.
      stopTimeout            = var.stop_timeout
      readonlyRootFilesystem = true
      logConfiguration = {
        logDriver = "awslogs"
        options = {
          awslogs-group         = aws_cloudwatch_log_group.this.name
          awslogs-region        = local.region
          awslogs-stream-prefix = "relay"
        }
      }
    },
  ])

  tags = var.tags

  lifecycle {
    precondition {
      condition     = length(setintersection(keys(var.environment), keys(local.relay_settings))) == 0
      error_message = "environment cannot set a setting this module manages (AWS_REGION, WORKER_OUTBOX_TABLE, WORKER_RELAY_*, WORKER_METRICS_*, WORKER_LOG_*)."
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

  # One relay is enough; during a deployment old and new tasks overlap (two
  # relays), which is safe: the marks are conditional writes, and a message
  # both send carries the same id, dropped as a duplicate downstream.
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

  # The first task may call what it needs.
  depends_on = [aws_iam_role_policy.task]
}
