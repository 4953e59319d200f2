<?php
// PHPUnit's own outcomes: a risky test (no assertions) and a warning.
use PHPUnit\Framework\TestCase;

final class OddTest extends TestCase
{
    public function testRisky(): void
    {
        if (!getenv('WITH_ODD')) {
            $this->assertTrue(true);
        }
    }

    public function testWarns(): void
    {
        if (getenv('WITH_ODD')) {
            $this->addWarning('deprecated configuration');
        }
        $this->assertTrue(true);
    }
}
