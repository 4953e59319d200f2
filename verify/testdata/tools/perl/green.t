# Fixture for verify/testdata/gen.sh: Test::More's TAP for a pass, a skip and a todo.
use strict;
use warnings;
use Test::More tests => 4;

ok(1 + 1 == 2, 'adds');
is(int(7 / 2), 3, 'divides');
SKIP: {
    skip 'no GPU here', 1;
    ok(0, 'renders');
}
TODO: {
    local $TODO = 'not implemented yet';
    is(sprintf('%.0f', 2.5), '3', 'rounds');
}
