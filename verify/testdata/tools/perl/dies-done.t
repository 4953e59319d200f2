# done_testing, then the program exits non-zero.
use strict;
use warnings;
use Test::More;

ok(1, 'connects');
ok(1, 'reads');
done_testing();
exit 3;
