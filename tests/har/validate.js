// Validate HAR files against the HAR 1.2 schema with har-validator, as
// installed by .ci/install.d/20-har-validator.sh into .ci/node.
// Usage: node validate.js FILE...; prints [{file, ok, bom, errors}] as JSON.
'use strict';
const fs = require('fs');
const path = require('path');
const root = path.resolve(__dirname, '..', '..', '.ci', 'node', 'node_modules');
const validator = require(path.join(root, 'har-validator'));

(async () => {
  const results = [];
  for (const file of process.argv.slice(2)) {
    const bytes = fs.readFileSync(file);
    const bom = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
    try {
      await validator.har(JSON.parse(bytes.toString('utf8')));
      results.push({ file, ok: true, bom });
    } catch (e) {
      results.push({ file, ok: false, bom, errors: e.errors || [String(e)] });
    }
  }
  process.stdout.write(JSON.stringify(results));
})();
