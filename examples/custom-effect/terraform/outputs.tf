output "queue_url" {
  description = "Send emails to this queue: worker send --queue <url>, or any SQS client."
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

output "service_name" {
  description = "The ECS service running the email worker."
  value       = module.worker.service_name
}

output "log_group_name" {
  description = "The worker's logs."
  value       = module.worker.log_group_name
}
