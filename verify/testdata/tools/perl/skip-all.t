# The whole file skipped on purpose.
use strict;
use warnings;
use Test::More skip_all => 'no database configured';
