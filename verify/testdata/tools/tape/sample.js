const test = require('tape');
test('adds', (t) => { t.equal(1 + 1, 2); t.end(); });
test('compares', (t) => { t.deepEqual({ a: 1 }, { a: 2 }, 'objects differ'); t.end(); });
