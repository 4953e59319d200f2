// A green run with a pending test.
const assert = require('assert');
describe('pending', function () {
  it('passes', function () { assert.strictEqual(1, 1); });
  it('is pending');
});
