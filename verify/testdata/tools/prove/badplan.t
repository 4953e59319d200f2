use strict; use warnings;
use Test::More tests => 3;
ok(1, 'one');
ok(1, 'two');
