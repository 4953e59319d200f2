import { describe, test, expect } from 'vitest';
describe('sum', () => {
  test('adds', () => { expect(1 + 2).toBe(3); });
  test('adds badly', () => { expect(1 + 2).toBe(4); });
  test.skip('skipped', () => {});
  test.todo('later');
});
