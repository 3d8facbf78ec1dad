# configure-installed.cmake -- run at install time (install(CODE) in
# packaging/CMakeLists.txt): writes TEMPLATE to OUT with the paths of the
# prefix being installed to, so `cmake --install BUILD --prefix X` gets X in
# ferrite.pc, the systemd unit and the umount helper, not the prefix the
# build was configured with. Input: TEMPLATE, OUT, PROJECT_VERSION, and the
# GNUInstallDirs values BINDIR, LIBDIR, INCLUDEDIR (relative to the prefix,
# or absolute). CMAKE_INSTALL_PREFIX is the prefix of this installation.
set(FERRITE_PREFIX "${CMAKE_INSTALL_PREFIX}")
foreach(dir BINDIR LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${${dir}}")
    set(FERRITE_${dir}_FULL "${${dir}}")
    set(FERRITE_PC_${dir} "${${dir}}")
  else()
    set(FERRITE_${dir}_FULL "${CMAKE_INSTALL_PREFIX}/${${dir}}")
    set(FERRITE_PC_${dir} "\${prefix}/${${dir}}")
  endif()
endforeach()
configure_file("${TEMPLATE}" "${OUT}" @ONLY)
