locals {
  # The table's format, fixed by the outbox package (outbox/schema.go): the
  # producer's writes and the relay's queries depend on every name here.
  hash_key  = "pk" # S: the queue URL, '#', the message group
  range_key = "sk" # N: 0 for the group's head, the message's sequence number otherwise
  # N, epoch seconds: set on a message once it is published, so that TTL
  # deletes it after the relay's retention (WORKER_RELAY_RETENTION).
  ttl_attribute = "ttl"

  # The sparse index of the groups with messages to publish: only a head
  # with something to publish carries pshard and since.
  pending_index   = "pending"
  shard_attribute = "pshard" # S: "0" .. "7", a hash of the group's key
  since_attribute = "since"  # N, epoch ms: when the oldest message to publish was committed

  # The stream wakes the relay on Lambda: its records' keys name the groups
  # to drain. The keys are all the relay reads, so nothing else is streamed.
  stream_view_type = "KEYS_ONLY"

  provisioned = var.billing_mode == "PROVISIONED"
}

resource "aws_dynamodb_table" "this" {
  name           = var.name
  billing_mode   = var.billing_mode
  hash_key       = local.hash_key
  range_key      = local.range_key
  table_class    = var.table_class
  read_capacity  = local.provisioned ? var.read_capacity : null
  write_capacity = local.provisioned ? var.write_capacity : null

  attribute {
    name = local.hash_key
    type = "S"
  }

  attribute {
    name = local.range_key
    type = "N"
  }

  attribute {
    name = local.shard_attribute
    type = "S"
  }

  attribute {
    name = local.since_attribute
    type = "N"
  }

  # Every attribute projected: the relay reads the head (queue, group, seq,
  # sent) from the index without a GetItem per group.
  global_secondary_index {
    name            = local.pending_index
    hash_key        = local.shard_attribute
    range_key       = local.since_attribute
    projection_type = "ALL"
    read_capacity   = local.provisioned ? var.read_capacity : null
    write_capacity  = local.provisioned ? var.write_capacity : null
  }

  # Only published messages carry ttl; TTL deletes them lazily (often within
  # two days), which the relay never depends on.
  ttl {
    enabled        = true
    attribute_name = local.ttl_attribute
  }

  stream_enabled   = true
  stream_view_type = local.stream_view_type

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

  lifecycle {
    precondition {
      condition     = !local.provisioned || (var.read_capacity != null && var.write_capacity != null)
      error_message = "billing_mode = \"PROVISIONED\" needs read_capacity and write_capacity."
    }
  }
}
