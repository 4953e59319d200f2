// A failing before() hook: mocha reports the hook, not the tests it guards.
const assert = require('assert');
describe('with a broken setup', function () {
  before(function () { throw new Error('database not reachable'); });
  it('uses the database', function () { assert.ok(true); });
});
describe('fine', function () {
  it('passes', function () { assert.strictEqual(1, 1); });
});
