output "queue_url" {
  description = "Send to this queue: worker send --queue <url>, or any SQS client."
  value       = module.queue.queue_url
}

output "dlq_url" {
  description = "The DLQ of the queue."
  value       = module.queue.dlq_url
}

output "dedup_table_name" {
  description = "The dedup table."
  value       = module.dedup_table.table_name
}

output "ledger_table_name" {
  description = "The ledger table the demo effect writes."
  value       = module.dedup_table.ledger_table_name
}

output "service_name" {
  description = "The ECS service running the worker."
  value       = module.worker.service_name
}

output "log_group_name" {
  description = "The worker's logs."
  value       = module.worker.log_group_name
}

output "operator_read_policy_arn" {
  description = "Attach to operators: worker inspect and worker stuck."
  value       = module.operator_policy.read_policy_arn
}

output "operator_forget_policy_arn" {
  description = "Attach to the few who may delete a dedup record: worker forget."
  value       = module.operator_policy.forget_policy_arn
}

output "outbox_table_name" {
  description = "The outbox table (WORKER_OUTBOX_TABLE of producers), or null without enable_outbox."
  value       = var.enable_outbox ? module.outbox_table[0].table_name : null
}

output "relay_service_name" {
  description = "The ECS service running the relay, or null without enable_outbox."
  value       = var.enable_outbox ? module.relay[0].service_name : null
}

output "topic_arn" {
  description = "The fan-out topic (a destination for outbox.Write), or null without enable_fanout."
  value       = local.fanout ? module.topic[0].topic_arn : null
}
