const test = require('tape');
test('adds', (t) => { t.equal(1 + 1, 2); t.equal(2 + 2, 4); t.end(); });
