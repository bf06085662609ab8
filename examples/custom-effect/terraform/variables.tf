variable "region" {
  description = "AWS region."
  type        = string
  default     = "us-east-1"
}

variable "name" {
  description = "Base name of the queue (exactly-email.fifo), its DLQ, the dedup table, the cluster and the service."
  type        = string
  default     = "exactly-email"
}

variable "container_image" {
  description = "Image of examples/custom-effect, from make image MAIN=./examples/custom-effect (ARM64, entrypoint /worker), pushed to a registry the tasks can pull from."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets with a route to SQS, DynamoDB, SSM, CloudWatch Logs, the image registry and the email API."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups of the tasks (outbound HTTPS)."
  type        = list(string)
}

variable "email_api_url" {
  description = "EMAIL_API_URL: where the email effect POSTs each message."
  type        = string

  validation {
    condition     = can(regex("^https://", var.email_api_url))
    error_message = "email_api_url must be an https:// URL."
  }
}

variable "email_api_token_parameter_arn" {
  description = "ARN of the SSM SecureString parameter holding the email API's token (EMAIL_API_TOKEN). Create it outside Terraform (aws ssm put-parameter --type SecureString), so that the token never enters the state; ECS reads it when a task starts."
  type        = string

  validation {
    condition     = can(regex("^arn:[^:]+:ssm:[^:]+:[0-9]{12}:parameter/.+$", var.email_api_token_parameter_arn))
    error_message = "email_api_token_parameter_arn must be an SSM parameter ARN (arn:<partition>:ssm:<region>:<account>:parameter/<name>)."
  }
}

variable "email_api_token_kms_key_arns" {
  description = "The customer managed KMS key of the token's parameter, if any (none for the default aws/ssm key)."
  type        = list(string)
  default     = []
}

variable "policy_statements" {
  description = "AWS calls of the effect, by Sid (the worker-ecs module's policy_statements). The email effect makes none."
  type = map(object({
    actions   = list(string)
    resources = list(string)
  }))
  default = {}
}

variable "alarm_actions" {
  description = "ARNs (SNS topics) notified by the alarms."
  type        = list(string)
  default     = []
}

variable "deletion_protection" {
  description = "Deletion protection of the dedup table. Set false for a stack you will destroy."
  type        = bool
  default     = true
}
