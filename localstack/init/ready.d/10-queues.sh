#!/bin/bash
# Creates the demo FIFO queue and its FIFO DLQ: redrive after 5 receives, a
# redrive allow policy that admits only the demo queue, visibility 30 s, SSE-SQS.
# The same settings as infra/terraform/modules/queue with its defaults.
set -euo pipefail

queue="${EXACTLY_QUEUE_NAME:-exactly-demo.fifo}"
dlq="${EXACTLY_DLQ_NAME:-exactly-demo-dlq.fifo}"
max_receive_count="${EXACTLY_MAX_RECEIVE_COUNT:-5}"
visibility_timeout="${EXACTLY_VISIBILITY_TIMEOUT:-30}"

dlq_url=$(awslocal sqs create-queue --queue-name "$dlq" \
	--attributes "FifoQueue=true,MessageRetentionPeriod=1209600,VisibilityTimeout=${visibility_timeout},SqsManagedSseEnabled=true" \
	--query QueueUrl --output text)
dlq_arn=$(awslocal sqs get-queue-attributes --queue-url "$dlq_url" \
	--attribute-names QueueArn --query Attributes.QueueArn --output text)

# RedrivePolicy is a JSON document inside a string attribute.
attributes=$(printf '{"FifoQueue":"true","VisibilityTimeout":"%s","MessageRetentionPeriod":"345600","ReceiveMessageWaitTimeSeconds":"20","SqsManagedSseEnabled":"true","RedrivePolicy":"{\\"deadLetterTargetArn\\":\\"%s\\",\\"maxReceiveCount\\":%s}"}' \
	"$visibility_timeout" "$dlq_arn" "$max_receive_count")
queue_url=$(awslocal sqs create-queue --queue-name "$queue" --attributes "$attributes" \
	--query QueueUrl --output text)
queue_arn=$(awslocal sqs get-queue-attributes --queue-url "$queue_url" \
	--attribute-names QueueArn --query Attributes.QueueArn --output text)

allow=$(printf '{"RedriveAllowPolicy":"{\\"redrivePermission\\":\\"byQueue\\",\\"sourceQueueArns\\":[\\"%s\\"]}"}' "$queue_arn")
awslocal sqs set-queue-attributes --queue-url "$dlq_url" --attributes "$allow"

echo "exactly: queue $queue_url, DLQ $dlq_url"
