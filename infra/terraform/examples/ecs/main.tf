provider "aws" {
  region = var.region

  default_tags {
    tags = {
      Project = "exactly"
    }
  }
}

locals {
  # The topic only with the relay that publishes to it.
  fanout = var.enable_outbox && var.enable_fanout
}

module "queue" {
  source = "../../modules/queue"

  name                       = var.name
  visibility_timeout_seconds = 30
  max_receive_count          = 5

  # With enable_fanout, the topic's grant joins the queue's policy (which
  # this module owns).
  source_queue_policy_documents = local.fanout ? [module.topic[0].queue_policy_documents["demo"]] : []
}

module "dedup_table" {
  source = "../../modules/dedup-table"

  create_ledger_table         = true
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
  source = "../../modules/worker-ecs"

  name               = "${var.name}-worker"
  cluster_arn        = aws_ecs_cluster.this.arn
  container_image    = var.container_image
  subnet_ids         = var.subnet_ids
  security_group_ids = var.security_group_ids

  queues = {
    demo = module.queue.worker_queue
  }

  dedup_table_name  = module.dedup_table.table_name
  dedup_table_arn   = module.dedup_table.table_arn
  effect            = "ledger"
  ledger_table_name = module.dedup_table.ledger_table_name
  ledger_table_arn  = module.dedup_table.ledger_table_arn

  shutdown_timeout_seconds = 90
  stop_timeout             = 120

  autoscaling_min_capacity = 1
  autoscaling_max_capacity = 4
}

# The producer half, with enable_outbox: an application commits messages to
# the outbox table in its own DynamoDB transactions, and the relay publishes
# them to the demo queue, where the worker applies each once. A worker whose
# effect sends messages itself would get outbox_table_name and
# outbox_table_arn (module.outbox_table[0].table_name / table_arn).
module "outbox_table" {
  source = "../../modules/outbox-table"
  count  = var.enable_outbox ? 1 : 0

  name                        = "${var.name}-outbox"
  deletion_protection_enabled = var.deletion_protection
}

module "relay" {
  source = "../../modules/relay-ecs"
  count  = var.enable_outbox ? 1 : 0

  name               = "${var.name}-relay"
  cluster_arn        = aws_ecs_cluster.this.arn
  container_image    = var.container_image
  subnet_ids         = var.subnet_ids
  security_group_ids = var.security_group_ids

  outbox_table_name = module.outbox_table[0].table_name
  outbox_table_arn  = module.outbox_table[0].table_arn
  queue_arns        = [module.queue.queue_arn]
  topic_arns        = local.fanout ? [module.topic[0].topic_arn] : []
}

# Fan-out, with enable_fanout (and enable_outbox): a FIFO topic the relay may
# publish to (an outbox.Write naming the topic's ARN), with the demo queue
# subscribed, raw delivery on. Subscribe more queues, each with a worker of
# its own, to apply every message once in each.
module "topic" {
  source = "../../modules/topic"
  count  = local.fanout ? 1 : 0

  name = "${var.name}-fanout"
  queues = {
    demo = { arn = module.queue.queue_arn, url = module.queue.queue_url }
  }
}

module "alarms" {
  source = "../../modules/alarms"

  queue_name    = module.queue.queue_name
  dlq_name      = module.queue.dlq_name
  alarm_actions = var.alarm_actions

  # The worker's metrics (EMF), the dedup table, the service's running tasks.
  dedup_table_name = module.dedup_table.table_name
  ecs_cluster_name = aws_ecs_cluster.this.name
  ecs_service_name = module.worker.service_name

  # The relay's lag and failures, with enable_outbox.
  outbox_table_name = var.enable_outbox ? module.outbox_table[0].table_name : null
}

# For people, not the worker: worker inspect and stuck (read), worker forget
# (deletes records). Attached to nothing; attach them to your operators.
module "operator_policy" {
  source = "../../modules/operator-policy"

  name            = "${var.name}-operator"
  dedup_table_arn = module.dedup_table.table_arn
  queue_arns      = [module.queue.queue_arn]
}
