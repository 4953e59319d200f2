// jasmine-reporters' JUnitXmlReporter, writing junitresults.xml in JUNIT_DIR (one file).
const reporters = require('jasmine-reporters');
jasmine.getEnv().addReporter(new reporters.JUnitXmlReporter({
  savePath: process.env.JUNIT_DIR || '.',
  consolidateAll: true,
}));
