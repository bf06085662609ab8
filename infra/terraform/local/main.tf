# The modules whose services the local stack serves (scripts/stack: fauxqs
# for SQS, DynamoDB Local for DynamoDB), applied there by make tf-apply-local
# with the same provider make tf-validate builds. What the emulators lack is
# turned off through the modules' variables, each said below and in README.md.
provider "aws" {
  region                      = "us-east-1"
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_requesting_account_id  = true
  skip_region_validation      = true

  endpoints {
    dynamodb = var.dynamodb_endpoint
    sqs      = var.sqs_endpoint
  }
}

# The worker's queue: FIFO, its FIFO DLQ, the redrive and redrive allow
# policies, and the queue policies that deny plain HTTP (fauxqs stores the
# policies; it enforces none).
module "queue" {
  source = "../modules/queue"

  name                       = var.name
  visibility_timeout_seconds = 30
  max_receive_count          = 5
  tags                       = var.tags
}

# Where the relay publishes the worker's confirmations (the demo's chain).
module "confirmations" {
  source = "../modules/queue"

  name                       = "${var.name}-confirmations"
  visibility_timeout_seconds = 30
  max_receive_count          = 5
  tags                       = var.tags
}

# DynamoDB Local has no point-in-time recovery (UpdateContinuousBackups is an
# unknown operation), reports no SSE, and has no tagging API; the tables are
# throwaway, so deletion protection is off for terraform destroy. For tfsec:
# no recovery and no SSE block are DynamoDB Local's gaps, on these local
# tables only (without the block DynamoDB still encrypts, with its own key).
#tfsec:ignore:aws-dynamodb-enable-recovery tfsec:ignore:aws-dynamodb-enable-at-rest-encryption
module "dedup_table" {
  source = "../modules/dedup-table"

  name                           = "${var.name}-dedup"
  create_ledger_table            = true
  ledger_table_name              = "${var.name}-ledger"
  point_in_time_recovery_enabled = false
  manage_server_side_encryption  = false
  deletion_protection_enabled    = false
}

# The second ledger, which the confirmations' worker writes (its dedup
# records go to this module's own dedup table).
#tfsec:ignore:aws-dynamodb-enable-recovery tfsec:ignore:aws-dynamodb-enable-at-rest-encryption
module "confirmed_table" {
  source = "../modules/dedup-table"

  name                           = "${var.name}-confirmed-dedup"
  create_ledger_table            = true
  ledger_table_name              = "${var.name}-ledger-confirmed"
  point_in_time_recovery_enabled = false
  manage_server_side_encryption  = false
  deletion_protection_enabled    = false
}

#tfsec:ignore:aws-dynamodb-enable-recovery tfsec:ignore:aws-dynamodb-enable-at-rest-encryption
module "outbox_table" {
  source = "../modules/outbox-table"

  name                           = "${var.name}-outbox"
  point_in_time_recovery_enabled = false
  manage_server_side_encryption  = false
  deletion_protection_enabled    = false
}
