from stitch.cli import main

raise SystemExit(main())
