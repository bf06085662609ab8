# Points the AWS provider of a Terraform example at LocalStack. Copy this file
# into infra/terraform/examples/<name>/; Terraform merges any *_override.tf into
# the provider "aws" block there. The provider does not read AWS_ENDPOINT_URL,
# so every service the examples use is listed.
provider "aws" {
  region                      = "us-east-1"
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_requesting_account_id  = true

  endpoints {
    appautoscaling = "http://127.0.0.1:4566"
    cloudwatch     = "http://127.0.0.1:4566"
    dynamodb       = "http://127.0.0.1:4566"
    ecs            = "http://127.0.0.1:4566"
    events         = "http://127.0.0.1:4566"
    iam            = "http://127.0.0.1:4566"
    kms            = "http://127.0.0.1:4566"
    lambda         = "http://127.0.0.1:4566"
    logs           = "http://127.0.0.1:4566"
    sns            = "http://127.0.0.1:4566"
    sqs            = "http://127.0.0.1:4566"
    sts            = "http://127.0.0.1:4566"
  }
}
