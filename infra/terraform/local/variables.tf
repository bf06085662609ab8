variable "name" {
  description = "Prefix of every queue and table this root creates; make tf-apply-local gives each run its own."
  type        = string
  default     = "exactly-local"
}

variable "sqs_endpoint" {
  description = "URL of the SQS emulator (fauxqs, scripts/stack): the provider's endpoint override for sqs."
  type        = string
  default     = "http://127.0.0.1:9324"
}

variable "dynamodb_endpoint" {
  description = "URL of DynamoDB Local (scripts/stack): the provider's endpoint override for dynamodb."
  type        = string
  default     = "http://127.0.0.1:8000"
}

variable "tags" {
  description = "Tags of the queues (fauxqs stores them). The tables get none: DynamoDB Local has no tagging API."
  type        = map(string)
  default     = { project = "exactly", stack = "tf-apply-local" }
}
