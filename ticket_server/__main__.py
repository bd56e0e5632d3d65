import sys

from ticket_server.cli import main

sys.exit(main())
