output "queue_url" {
  description = "URL of the queue, for WORKER_QUEUES."
  value       = aws_sqs_queue.this.url
}

output "queue_arn" {
  description = "ARN of the queue."
  value       = aws_sqs_queue.this.arn
}

output "queue_name" {
  description = "Name of the queue (with .fifo for a FIFO queue)."
  value       = aws_sqs_queue.this.name
}

output "visibility_timeout_seconds" {
  description = "Visibility timeout of the queue, for the worker-lambda module's precondition."
  value       = aws_sqs_queue.this.visibility_timeout_seconds
}

output "fifo_queue" {
  description = "Whether the queue is FIFO."
  value       = aws_sqs_queue.this.fifo_queue
}

output "deduplication_scope" {
  description = "\"queue\" or \"messageGroup\" for a FIFO queue, null for a standard queue."
  value       = aws_sqs_queue.this.deduplication_scope
}

output "dlq_url" {
  description = "URL of the DLQ, or null without create_dlq."
  value       = one(aws_sqs_queue.dlq[*].url)
}

output "dlq_arn" {
  description = "ARN of the DLQ, or null without create_dlq. The worker may send a permanently failing message there."
  value       = one(aws_sqs_queue.dlq[*].arn)
}

output "dlq_name" {
  description = "Name of the DLQ, or null without create_dlq."
  value       = one(aws_sqs_queue.dlq[*].name)
}

output "worker_queue" {
  description = "The queue as the worker modules take it in their queues map."
  value = {
    arn                        = aws_sqs_queue.this.arn
    url                        = aws_sqs_queue.this.url
    visibility_timeout_seconds = aws_sqs_queue.this.visibility_timeout_seconds
    dlq_arn                    = one(aws_sqs_queue.dlq[*].arn)
    max_receive_count          = var.create_dlq ? var.max_receive_count : null
  }
}

output "queue_policy_json" {
  description = "The queue's policy (the deny of plain HTTP and any source_queue_policy_documents), or null when it has none."
  value       = try(data.aws_iam_policy_document.queue["queue"].json, null)
}
