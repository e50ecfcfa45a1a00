#!/bin/sh
# ctest "package/typescript: ...": `npm pack` the built client, install the tarball into an
# empty project (its pinned dependency from npm's cache when there), and run the example
# there twice against a fresh schema: accepted, then a duplicate of the same receipt.
set -eu
client=$1
: "${BOXCAR_CLI_PATH:?the boxcar CLI, to migrate the schema}"
work=$(mktemp -d /tmp/boxcar-ts-pack.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$client"
tarball=$(npm pack --silent --pack-destination "$work" | tail -n 1)
mkdir "$work/app"
cd "$work/app"
npm init -y >/dev/null
npm install --prefer-offline --no-audit --no-fund "$work/$tarball" >&2
cp "$client/example/index.js" .
# The package holds the compiled client and its declarations, nothing of the tests.
test -f node_modules/boxcar-client/build/src/index.js
test -f node_modules/boxcar-client/build/src/index.d.ts
if [ -d node_modules/boxcar-client/build/test ]; then echo "the tarball carries the tests" >&2; exit 1; fi
export BOXCAR_DATABASE_URL="$BOXCAR_TEST_DATABASE_URL"
export BOXCAR_SCHEMA="ts_pack_$$"
"$BOXCAR_CLI_PATH" migrate >/dev/null
status=0
first=$(node index.js) || status=$?
second=$(node index.js) || status=$?
psql_drop() { node -e "
const { Client } = require('pg');
const c = new Client({ connectionString: process.env.BOXCAR_DATABASE_URL });
c.connect().then(() => c.query('DROP SCHEMA \"' + process.env.BOXCAR_SCHEMA + '\" CASCADE')).then(() => c.end());"; }
psql_drop
echo "$first"; echo "$second"
[ "$status" -eq 0 ] || { echo "the example failed" >&2; exit 1; }
id=$(echo "$first" | sed -n 's/^accepted receipt \([0-9]*\) (PENDING)$/\1/p')
[ -n "$id" ] || { echo "the first run was not accepted" >&2; exit 1; }
echo "$second" | grep -qx "duplicate receipt $id (PENDING)" || { echo "the redelivery was not a duplicate of $id" >&2; exit 1; }
echo "$first" | grep -q '^emitted event [0-9a-f-]*$'
