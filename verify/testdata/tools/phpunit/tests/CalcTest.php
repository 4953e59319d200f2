<?php
// Fixture test for verify/testdata/gen.sh: what PHPUnit's JUnit log says about each outcome.
use PHPUnit\Framework\TestCase;

final class CalcTest extends TestCase
{
    public function testAdds(): void
    {
        $this->assertSame(2, 1 + 1);
        $this->assertSame(4, 2 + 2);
        $this->assertSame(6, 3 + 3);
    }

    public function testDivides(): void
    {
        $this->assertSame(getenv('WITH_FAIL') ? 4 : 3, intdiv(7, 2));
    }

    public function testNeedsGpu(): void
    {
        $this->markTestSkipped('needs a GPU');
    }

    public function testRounds(): void
    {
        $this->markTestIncomplete('not implemented yet');
    }

    /** @dataProvider pairs */
    public function testSubtracts(int $a, int $b, int $want): void
    {
        $this->assertSame($want, $a - $b);
    }

    public static function pairs(): array
    {
        return ['small' => [2, 1, 1], 'zero' => [1, 1, 0]];
    }

    public function testThrows(): void
    {
        if (getenv('WITH_ERROR')) {
            throw new RuntimeException('cannot connect to the database');
        }
        $this->assertTrue(true);
    }
}
