"""What the tests share that is not a fixture: the project's paths, the app in this process
(`inprocess`), real server processes (`server`), the browser (`browser`), the W3C suites (`w3c`), the
owlrl reference (`owlrl_reference`) and a ring of real nodes (`ring`)."""
