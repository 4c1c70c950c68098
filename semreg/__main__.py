from semreg.cli import main

raise SystemExit(main())
