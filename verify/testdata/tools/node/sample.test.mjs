import { test, describe, it } from 'node:test';
import assert from 'node:assert';

test('adds', () => { assert.strictEqual(1 + 1, 2); });
test('compares objects', () => { assert.deepStrictEqual({ a: 1, json: '{"Action":"run"}' }, { a: 2 }); });
test('skipped', { skip: 'not today' }, () => {});
test('todo failing', { todo: 'later' }, () => { throw new Error('not done'); });
describe('math', () => {
  it('multiplies', () => { assert.strictEqual(2 * 3, 6); });
  it('divides', () => { assert.strictEqual(1 / 0, 0); });
});
