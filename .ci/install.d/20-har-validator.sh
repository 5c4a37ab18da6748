#!/usr/bin/env bash
# The HAR 1.2 schema, as the npm package har-validator checks it: installed
# into .ci/node/node_modules (ignored by git) for tests/har to run every HAR
# they make through it. Quick when it is there already.
set -euo pipefail
cd "$(dirname "$0")/../.."
HAR_VALIDATOR_VERSION=5.1.5
dest=.ci/node
if [ -f "$dest/node_modules/har-validator/package.json" ] &&
   grep -q "\"version\": \"$HAR_VALIDATOR_VERSION\"" "$dest/node_modules/har-validator/package.json"; then
    exit 0
fi
mkdir -p "$dest"
npm install --silent --no-audit --no-fund --no-save --prefix "$dest" "har-validator@$HAR_VALIDATOR_VERSION"
node -e "require('$PWD/$dest/node_modules/har-validator')" 
