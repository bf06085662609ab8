# examples/custom-effect on ECS Fargate: its own queue and dedup table, and the
# worker module running the image of this binary (make image
# MAIN=./examples/custom-effect) with the email effect's settings and secret.

provider "aws" {
  region = var.region

  default_tags {
    tags = {
      Project = "exactly"
    }
  }
}

module "queue" {
  source = "../../../infra/terraform/modules/queue"

  name                       = var.name
  visibility_timeout_seconds = 60
  max_receive_count          = 5
}

# The email effect calls an API: it writes no DynamoDB table of its own.
module "dedup_table" {
  source = "../../../infra/terraform/modules/dedup-table"

  name                        = "${var.name}-dedup"
  create_ledger_table         = false
  deletion_protection_enabled = var.deletion_protection
}

resource "aws_ecs_cluster" "this" {
  name = var.name

  # Backlog-per-task autoscaling reads RunningTaskCount from Container Insights.
  setting {
    name  = "containerInsights"
    value = "enabled"
  }
}

module "worker" {
  source = "../../../infra/terraform/modules/worker-ecs"

  name               = "${var.name}-worker"
  cluster_arn        = aws_ecs_cluster.this.arn
  container_image    = var.container_image
  subnet_ids         = var.subnet_ids
  security_group_ids = var.security_group_ids

  queues = {
    emails = module.queue.worker_queue
  }

  dedup_table_name = module.dedup_table.table_name
  dedup_table_arn  = module.dedup_table.table_arn

  # The name main.go registers, and what newSendEmail reads.
  effect = "email"
  environment = {
    EMAIL_API_URL = var.email_api_url
  }
  secrets = {
    EMAIL_API_TOKEN = var.email_api_token_parameter_arn
  }
  secrets_kms_key_arns = var.email_api_token_kms_key_arns

  # This effect calls no AWS service; one that does lists its calls here.
  policy_statements = var.policy_statements

  autoscaling_min_capacity = 1
  autoscaling_max_capacity = 4
}

module "alarms" {
  source = "../../../infra/terraform/modules/alarms"

  queue_name    = module.queue.queue_name
  dlq_name      = module.queue.dlq_name
  alarm_actions = var.alarm_actions

  dedup_table_name = module.dedup_table.table_name
  ecs_cluster_name = aws_ecs_cluster.this.name
  ecs_service_name = module.worker.service_name
}
