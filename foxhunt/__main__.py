from foxhunt.cli import main

raise SystemExit(main())
