locals {
  # The worker's record layout: one item per logical message, keyed by the scoped key.
  hash_key = "pk"
}

resource "aws_dynamodb_table" "this" {
  name         = var.name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = local.hash_key
  table_class  = var.table_class

  attribute {
    name = local.hash_key
    type = "S"
  }

  # TTL deletes lazily (often within two days); the worker treats expires_at < now as absent.
  ttl {
    enabled        = true
    attribute_name = var.ttl_attribute_name
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery_enabled
  }

  # Always written in AWS; left out only for DynamoDB Local, which never
  # reports SSE (manage_server_side_encryption).
  dynamic "server_side_encryption" {
    for_each = var.manage_server_side_encryption ? ["sse"] : []

    content {
      enabled     = true
      kms_key_arn = var.server_side_encryption_kms_key_arn
    }
  }

  deletion_protection_enabled = var.deletion_protection_enabled

  tags = var.tags
}

resource "aws_dynamodb_table" "ledger" {
  count = var.create_ledger_table ? 1 : 0

  name         = var.ledger_table_name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = local.hash_key
  table_class  = var.table_class

  attribute {
    name = local.hash_key
    type = "S"
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery_enabled
  }

  # Always written in AWS; left out only for DynamoDB Local, which never
  # reports SSE (manage_server_side_encryption).
  dynamic "server_side_encryption" {
    for_each = var.manage_server_side_encryption ? ["sse"] : []

    content {
      enabled     = true
      kms_key_arn = var.server_side_encryption_kms_key_arn
    }
  }

  deletion_protection_enabled = var.deletion_protection_enabled

  tags = var.tags
}
