# A failing test.
use strict;
use warnings;
use Test::More tests => 2;

ok(1 + 1 == 2, 'adds');
is(int(7 / 2), 4, 'divides');
