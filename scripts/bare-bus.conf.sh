# Sourced by scripts/with-keyring.sh and scripts/with-keepassxc.sh.
#
# write_bare_bus_config FILE DIR: a session bus configuration without <servicedir>, so nothing can be
# activated on it (no gnome-keyring started on demand), listening in DIR, letting tests eavesdrop
# (dbus-monitor counts the Secret Service calls).
write_bare_bus_config() {
    cat >"$1" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:tmpdir=$2</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF
}
