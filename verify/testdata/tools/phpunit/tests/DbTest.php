<?php
// A failing setUpBeforeClass: an error outside any test.
use PHPUnit\Framework\TestCase;

final class DbTest extends TestCase
{
    public static function setUpBeforeClass(): void
    {
        if (getenv('WITH_SETUP_FAIL')) {
            throw new RuntimeException('fixture server did not start');
        }
    }

    public function testQuery(): void
    {
        $this->assertTrue(true);
    }
}
