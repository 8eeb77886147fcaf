from npu_port.transpiler.cli import main

main()
