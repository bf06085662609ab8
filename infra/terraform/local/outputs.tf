output "queue_url" {
  description = "URL of the worker's queue (WORKER_QUEUES)."
  value       = module.queue.queue_url
}

output "dlq_url" {
  description = "URL of the worker's DLQ, where the poison message must end."
  value       = module.queue.dlq_url
}

output "confirmations_queue_url" {
  description = "URL of the queue the relay publishes the confirmations to (WORKER_LEDGER_CONFIRM_QUEUE)."
  value       = module.confirmations.queue_url
}

output "confirmations_dlq_url" {
  description = "URL of the confirmations' DLQ, which must stay empty."
  value       = module.confirmations.dlq_url
}

output "dedup_table_name" {
  description = "Dedup table of the first worker (WORKER_DEDUP_TABLE)."
  value       = module.dedup_table.table_name
}

output "ledger_table_name" {
  description = "Ledger of the first worker (WORKER_LEDGER_TABLE)."
  value       = module.dedup_table.ledger_table_name
}

output "confirmed_dedup_table_name" {
  description = "Dedup table of the confirmations' worker."
  value       = module.confirmed_table.table_name
}

output "confirmed_ledger_table_name" {
  description = "Ledger of the confirmations' worker."
  value       = module.confirmed_table.ledger_table_name
}

output "outbox_table_name" {
  description = "Outbox table (WORKER_OUTBOX_TABLE of the first worker and of the relay)."
  value       = module.outbox_table.table_name
}
