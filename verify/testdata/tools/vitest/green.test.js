import { test, expect } from 'vitest';
test('green', () => { expect(1).toBe(1); });
