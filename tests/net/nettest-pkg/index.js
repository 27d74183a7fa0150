module.exports = "nettest-pkg from registry.test";
