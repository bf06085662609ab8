output "topic_arn" {
  description = "ARN of the topic: the destination outbox.Write names, and the relay module's topic_arns."
  value       = aws_sns_topic.this.arn
}

output "topic_name" {
  description = "Name of the topic (with .fifo for a FIFO topic)."
  value       = aws_sns_topic.this.name
}

output "subscription_arns" {
  description = "ARN of each queue's subscription, by the key of queues."
  value       = { for key, s in aws_sns_topic_subscription.this : key => s.arn }
}

output "queue_policy_documents" {
  description = "By the key of queues: the policy statement (JSON) that lets the topic send to the queue. Pass it to the queue module's source_queue_policy_documents unless write_queue_policy is true."
  value       = { for key, d in data.aws_iam_policy_document.queue : key => d.json }
}
