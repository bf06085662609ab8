#!/bin/bash
# Creates the dedup table (hash key pk, TTL on expires_at) and the ledger table
# (hash key pk) with the worker's default names, on-demand, as
# infra/terraform/modules/dedup-table does.
set -euo pipefail

dedup_table="${EXACTLY_DEDUP_TABLE:-exactly-dedup}"
ledger_table="${EXACTLY_LEDGER_TABLE:-exactly-ledger}"

create_table() {
	local name=$1
	if awslocal dynamodb describe-table --table-name "$name" >/dev/null 2>&1; then
		return 0
	fi
	awslocal dynamodb create-table --table-name "$name" \
		--attribute-definitions AttributeName=pk,AttributeType=S \
		--key-schema AttributeName=pk,KeyType=HASH \
		--billing-mode PAY_PER_REQUEST >/dev/null
	awslocal dynamodb wait table-exists --table-name "$name"
}

create_table "$dedup_table"
# The worker writes expires_at (epoch seconds) and treats an expired record as
# absent; TTL only deletes it. Enabling TTL twice is an error, so check first.
ttl=$(awslocal dynamodb describe-time-to-live --table-name "$dedup_table" \
	--query TimeToLiveDescription.TimeToLiveStatus --output text)
if [ "$ttl" != ENABLED ]; then
	awslocal dynamodb update-time-to-live --table-name "$dedup_table" \
		--time-to-live-specification Enabled=true,AttributeName=expires_at >/dev/null
fi
create_table "$ledger_table"

echo "exactly: tables $dedup_table (TTL expires_at) and $ledger_table"
