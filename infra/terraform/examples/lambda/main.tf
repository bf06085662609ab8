provider "aws" {
  region = var.region

  default_tags {
    tags = {
      Project = "exactly"
    }
  }
}

locals {
  zip_arch     = var.architecture == "arm64" ? "arm64" : "amd64"
  package_path = coalesce(var.package_path, "${path.module}/../../../../dist/worker-lambda-${local.zip_arch}.zip")
}

module "queue" {
  source = "../../modules/queue"

  name = var.name
  # AWS's guidance for SQS event sources; the worker-lambda module checks it.
  visibility_timeout_seconds = 6 * var.function_timeout
  # Above batch_size (10): a message a batch hands back unstarted spends a
  # receive; the worker-lambda module checks it.
  max_receive_count = 15
}

module "dedup_table" {
  source = "../../modules/dedup-table"

  create_ledger_table         = true
  deletion_protection_enabled = var.deletion_protection
}

module "worker" {
  source = "../../modules/worker-lambda"

  function_name = "${var.name}-worker"
  package_path  = local.package_path
  architecture  = var.architecture
  timeout       = var.function_timeout

  queues = {
    demo = module.queue.worker_queue
  }
  batch_size          = 10
  maximum_concurrency = 5

  dedup_table_name  = module.dedup_table.table_name
  dedup_table_arn   = module.dedup_table.table_arn
  effect            = "ledger"
  ledger_table_name = module.dedup_table.ledger_table_name
  ledger_table_arn  = module.dedup_table.ledger_table_arn
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
  source = "../../modules/relay-lambda"
  count  = var.enable_outbox ? 1 : 0

  function_name = "${var.name}-relay"
  package_path  = local.package_path
  architecture  = var.architecture

  outbox_table_name = module.outbox_table[0].table_name
  outbox_table_arn  = module.outbox_table[0].table_arn
  outbox_stream_arn = module.outbox_table[0].stream_arn
  queue_arns        = [module.queue.queue_arn]
}

module "alarms" {
  source = "../../modules/alarms"

  queue_name    = module.queue.queue_name
  dlq_name      = module.queue.dlq_name
  alarm_actions = var.alarm_actions

  # The worker's metrics (EMF), the dedup table, the function.
  dedup_table_name     = module.dedup_table.table_name
  lambda_function_name = module.worker.function_name

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
