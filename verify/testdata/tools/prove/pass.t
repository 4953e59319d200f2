use strict; use warnings;
use Test::More tests => 2;
ok(1, 'one');
is(2, 2, 'two');
