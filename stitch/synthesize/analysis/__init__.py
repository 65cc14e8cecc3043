"""What the rewrites know about the code they rewrite: which names a block reads, stores and
returns (``names``), which ``if`` of the model's source a break site is (``origins``), and
what one function's rewrite knows and decided (``context``). Nothing here changes code."""
